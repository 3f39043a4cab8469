# syntax=docker/dockerfile:1.7@sha256:a57df69d0ea827fb7266491f2813635de6f17269be881f696fbfdf2d83dda33e
# kruise-admission: a static (musl) binary on distroless/static, running as non-root 65532.
#
#   docker build -t kruise-admission:0.1.0 .
#   kind load docker-image kruise-admission:0.1.0            # then install (README, "Install with Helm")
#
# The test fixtures (tests/fixtures) are not needed to build the binary.
#
# Every image is pinned by digest (the tag stays for readers; the digest decides what is pulled),
# so a rebuild of the same commit uses the same bases. To move a base, look up the tag's current
# index digest and commit the change, e.g.
#   docker buildx imagetools inspect rust:1.95-alpine --format '{{json .Manifest.Digest}}'
#   crane digest gcr.io/distroless/static-debian12:nonroot
# The digests below were not resolved against the registries from the machine that wrote them (it
# has no registry access); they are the ones public Dockerfiles pin for these tags. Check them with
# the commands above before the first release build.

FROM rust:1.95-alpine@sha256:606fd313a0f49743ee2a7bd49a0914bab7deedb12791f3a846a34a4711db7ed2 AS build
# ring compiles C and assembly; musl-dev provides the static libc to link against.
RUN apk add --no-cache musl-dev
WORKDIR /src
# The whole source tree (.dockerignore drops target/, .git/ and certs/, where `serve` keeps a
# generated CA key, so no private key can end up in an image layer): Cargo.toml may declare benches
# and tests, and cargo wants their files present even when building only the binary.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kruise-admission \
 && install -D -m 0755 target/release/kruise-admission /out/kruise-admission

FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
COPY --from=build /out/kruise-admission /usr/local/bin/kruise-admission
# mimalloc gives freed pages back to the kernel at once instead of after its purge delay: with the
# delay, 96 clients flooding 3 MiB reviews left a peak resident set of 239 MiB, past the memory
# budget's own bound (idle + --max-in-flight-bytes, 193 MiB); with 0, 190 MiB
# (tests/hostile_memory.rs, issue 30.1).
ENV MIMALLOC_PURGE_DELAY=0
# The same uid the Deployment's securityContext sets (runAsNonRoot needs a numeric user).
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/kruise-admission"]
CMD ["serve"]
