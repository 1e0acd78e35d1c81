# The server's image, as artifacts/deploy/40-deployment.yaml names it
# (backstop-apiserver:latest): the binary `make build` makes, on Debian.
# Without Docker, `make image` packs the same binary with the libraries it
# links (hack/build-image.sh); that image is the one the tests run as pods.
# libvirt is loaded at run time (libvirt_dlopen), only where VM disk
# backups run, so the image does not carry it.
FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

FROM debian:trixie-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/_output/bin/backstop-apiserver /usr/local/bin/backstop-apiserver
ENTRYPOINT ["/usr/local/bin/backstop-apiserver"]
