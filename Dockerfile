# syntax=docker/dockerfile:1

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/agentfs ./cmd/agentfs

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentfs /agentfs
ENV AGENTFS_LISTEN_ADDR=0.0.0.0:8080
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/agentfs"]
CMD ["serve"]
