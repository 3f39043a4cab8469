# syntax=docker/dockerfile:1.7@sha256:a57df69d0ea827fb7266491f2813635de6f17269be881f696fbfdf2d83dda33e
# kruise-admission: a static binary on `scratch`, running as 65532:65532 with a read-only root.
#
#   docker build --build-arg REVISION="$(git rev-parse HEAD)" --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" -t kruise-admission:0.1.0 .
#   buildah bud --build-arg REVISION="$(git rev-parse HEAD)" --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" -t kruise-admission:0.1.0 .
#
# The same image as .ci/image.sh builds without a Docker engine (docs/install.md, "The image"): the
# target, RUSTFLAGS, paths, user, entrypoint, arguments and labels are those of image.env, and
# tests/hardening.rs fails when this file and image.env disagree. The binary is for linux/amd64,
# so both stages say so (on another machine the build runs emulated).
#
# The builder is pinned by digest (the tag stays for readers; the digest decides what is pulled), so
# a rebuild of the same commit uses the same toolchain. To move it, look up the tag's current index
# digest and commit the change:
#   docker buildx imagetools inspect rust:1.95.0-bookworm --format '{{json .Manifest.Digest}}'
# This machine has no registry access: the digests here are the ones public builds resolved for
# these tags, not checked from here. Check them with the command above before the first release.

FROM --platform=linux/amd64 rust:1.95.0-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
WORKDIR /src
# The whole source tree (.dockerignore drops target/, .git/ and certs/, where `serve` keeps a
# generated CA key, so no private key can end up in an image layer): Cargo.toml may declare benches
# and tests, and cargo wants their files present even when building only the binary.
COPY . .
# Static glibc (libc6-dev's libc.a, in the image): the final stage has no libraries. Why the
# getrandom cfg: image.env.
ENV RUSTFLAGS="-C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\""
# `--version` names the commit and the build date (build.rs). The context has no .git, so the
# commit comes from REVISION ("unknown" without it) and the date from SOURCE_DATE_EPOCH (BuildKit's
# reproducible-builds argument; "unknown" without it):
#   --build-arg REVISION="$(git rev-parse HEAD)" --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)"
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH
# The two trees the final stage copies: the binary and an empty cluster folder, and the
# certificate folder, which it gives to the user.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    KRUISE_ADMISSION_REVISION="$REVISION" \
    cargo build --release --locked --target x86_64-unknown-linux-gnu --bin kruise-admission \
 && install -D -m 0755 target/x86_64-unknown-linux-gnu/release/kruise-admission /out/rootfs/usr/local/bin/kruise-admission \
 && install -d -m 0755 /out/rootfs/etc/kruise-admission/cluster /out/certs

FROM --platform=linux/amd64 scratch
COPY --from=build /out/rootfs/ /
COPY --from=build --chown=65532:65532 /out/certs/ /etc/kruise-admission/tls/
# image.env's IMAGE_ENV (why: there).
ENV MIMALLOC_PURGE_DELAY=0
USER 65532:65532
WORKDIR /etc/kruise-admission
VOLUME ["/etc/kruise-admission/tls"]
EXPOSE 9443 8080
ENTRYPOINT ["/usr/local/bin/kruise-admission"]
CMD ["serve", "--cert-dir=/etc/kruise-admission/tls", "--cluster-dir=/etc/kruise-admission/cluster", "--listen=0.0.0.0:9443"]
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/kruise-admission/kruise-admission" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
