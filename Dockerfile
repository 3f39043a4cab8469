# syntax=docker/dockerfile:1.7
# kruise-admission: a static (musl) binary on distroless/static, running as non-root 65532.
#
#   docker build -t kruise-admission:0.1.0 .
#   kind load docker-image kruise-admission:0.1.0            # then install (README, "Install with Helm")
#
# The test fixtures (tests/fixtures) are not needed to build the binary.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS build
# ring compiles C and assembly; musl-dev provides the static libc to link against.
RUN apk add --no-cache musl-dev
WORKDIR /src
# The whole source tree (.dockerignore drops target/ and .git/): Cargo.toml may declare benches
# and tests, and cargo wants their files present even when building only the binary.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kruise-admission \
 && install -D -m 0755 target/release/kruise-admission /out/kruise-admission

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kruise-admission /usr/local/bin/kruise-admission
# The same uid the Deployment's securityContext sets (runAsNonRoot needs a numeric user).
USER 65532:65532
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/kruise-admission"]
CMD ["serve"]
