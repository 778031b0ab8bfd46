package main

import (
	"context"
	"crypto/tls"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// connOptions are the connection settings taken from -redis, applied to
// every adapter.
type connOptions struct {
	username, password string
	db                 int
	tls                *tls.Config
}

// adapter is one store adapter of the matrix: how to connect it to a single
// server and to a Cluster.
type adapter struct {
	name    string
	single  func(connOptions) conformance.Dialer
	cluster func(connOptions) conformance.ClusterDialer
}

func adapters() []adapter {
	return []adapter{
		{"goredis", goredisSingle, goredisCluster},
	}
}

func goredisSingle(o connOptions) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Username: o.username, Password: o.password, DB: o.db, TLSConfig: o.tls})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

func goredisCluster(o connOptions) conformance.ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: o.username, Password: o.password, TLSConfig: o.tls})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}
