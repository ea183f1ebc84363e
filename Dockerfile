# gatehouse's container image: one static binary on an empty base (no
# shell, no package manager), run by an unprivileged user. docs/deploy.md
# explains it; compose.yaml runs it with Postgres, Redis and HAProxy.
#
#   docker build -t gatehouse .        (or: buildah bud -t gatehouse .)
#
# The build stage leaves everything the image holds under /out; the final
# stage only copies it. CI builds the final stage from its own static
# binary instead (buildah --build-context build=DIR with the same /out
# layout), as the machine it runs on reaches no image registry.

ARG GO_IMAGE=docker.io/library/golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: a static binary (the embedded SQLite driver is pure Go),
# which runs on scratch.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gatehouse ./cmd/gatehouse \
 && mkdir -p /out/etc/ssl/certs /out/data/data /out/tmp/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && chmod 0700 /out/data/data \
 && chmod 1777 /out/tmp/tmp

FROM scratch
# CA certificates for outbound HTTPS: webhooks, the payment provider, rediss://.
COPY --from=build /out/etc/ /etc/
# A temporary directory for SQLite's large sorts. (Directories are
# copied with their parent so that they keep their modes.)
COPY --from=build /out/tmp/ /
# The data directory (0700) belongs to the user that runs the process:
# the embedded database and its development keys live there (mount a
# volume on /data to keep them); with Postgres it stays nearly empty.
COPY --from=build --chown=10001:10001 /out/data/ /
COPY --from=build /out/gatehouse /usr/local/bin/gatehouse
USER 10001:10001
# Listen on every interface of the container (the defaults are loopback,
# which nothing outside the container reaches).
ENV GATEHOUSE_ADDR=0.0.0.0:8080 \
    GATEHOUSE_ADMIN_ADDR=0.0.0.0:8081 \
    GATEHOUSE_DATA_DIR=/data
EXPOSE 8080 8081
# The binary probes its own /readyz (there is no curl or shell here):
# unhealthy while the database or Redis does not answer, or while the
# process drains before stopping.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/usr/local/bin/gatehouse", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gatehouse"]
CMD ["serve"]
