# Sourced by the scripts under .ci/, benches/ and tests/independent/: where cargo puts things, asked
# of cargo itself, so CARGO_TARGET_DIR, `build.target-dir` in a cargo config and a relative target
# directory all work. Never a fixed `target/` path.
#
#   cargo_target_dir                    the target directory (absolute)
#   cargo_exe NAME [cargo build args]   build, then print the absolute path of the executable NAME
#                                       (a bin or an example) that the build produced
#
# Needs python3 (every script that sources this already does).

cargo_target_dir() {
    cargo metadata --format-version 1 --no-deps \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

cargo_exe() {
    local name=$1
    shift
    # Compiler messages go to stderr as usual; stdout carries one JSON message per artifact.
    cargo build --message-format=json-render-diagnostics "$@" | python3 -c '
import json, sys
name, found = sys.argv[1], []
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == name:
        found.append(m["executable"])
if not found:
    sys.exit(f"cargo built no executable named {name}")
print(found[-1])
' "$name"
}
