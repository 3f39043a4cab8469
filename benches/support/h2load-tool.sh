# shellcheck shell=bash
# Sourced by benches/h2load.sh and benches/apiserver.sh (after OUT is set): sets H2LOAD to h2load,
# from H2LOAD, else PATH, else Debian's nghttp2-client unpacked under OUT (no root needed).
if [ -n "${H2LOAD:-}" ]; then
    :
elif command -v h2load >/dev/null; then
    H2LOAD=$(command -v h2load)
else
    if [ ! -x "$OUT/nghttp2/usr/bin/h2load" ]; then
        echo "unpacking Debian's nghttp2-client (h2load) under $OUT/nghttp2" >&2
        rm -rf "$OUT/debs" && mkdir -p "$OUT/debs"
        (cd "$OUT/debs" && apt-get download nghttp2-client libnghttp2-14 libev4 libjemalloc2)
        for deb in "$OUT"/debs/*.deb; do dpkg -x "$deb" "$OUT/nghttp2"; done
    fi
    H2LOAD=$OUT/nghttp2/usr/bin/h2load
    export LD_LIBRARY_PATH="$OUT/nghttp2/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$H2LOAD" --version
