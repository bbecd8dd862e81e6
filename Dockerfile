# The seckill image: one static binary, every subcommand (edge, engine,
# consumer, admin). Pure Go (the SQLite driver too), so CGO is off and the
# runtime image needs no libc.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/seckill ./cmd/seckill

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/seckill /usr/local/bin/seckill
# A default config; docker-compose mounts configs/prod.yaml over it.
COPY configs/prod.yaml /etc/seckill/prod.yaml
USER nonroot:nonroot
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/seckill"]
CMD ["edge", "--config", "/etc/seckill/prod.yaml"]
