package main

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"time"

	redigoredis "github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
	"github.com/redis/rueidis"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// connOptions are the connection settings taken from -redis, applied to
// every adapter, and client settings of one adapter that a command sets.
type connOptions struct {
	username, password string
	db                 int
	tls                *tls.Config
	// rueidisFlushDelay is the rueidis client's MaxFlushDelay (bench's
	// -rueidis-flush-delay; 0, rueidis's default, elsewhere).
	rueidisFlushDelay time.Duration
}

// goredisDialer is go-redis's dialer for o: nil (go-redis's own) over
// plain TCP, goredis.TLSDialer over TLS.
func (o connOptions) goredisDialer() func(context.Context, string, string) (net.Conn, error) {
	if o.tls == nil {
		return nil
	}
	return goredis.TLSDialer(&net.Dialer{Timeout: 5 * time.Second}, o.tls)
}

// adapter is one store adapter of the matrix: how to connect it to a single
// server and to a Cluster.
type adapter struct {
	name    string
	single  func(connOptions) conformance.Dialer
	cluster func(connOptions) conformance.ClusterDialer
}

// quietLogger drops go-redis's own log lines: the suite cuts, blackholes
// and closes connections on purpose, and the report says what happened.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietLogger{}) }

// network is the network a server's address is on: "unix" for the path of
// a Unix socket (-redis unix:///path), which has a slash that host:port
// never has, else "tcp".
func network(addr string) string {
	if strings.Contains(addr, "/") {
		return "unix"
	}
	return "tcp"
}

func adapters() []adapter {
	return []adapter{
		{"goredis", goredisSingle, goredisCluster},
		{"rueidis", rueidisSingle, rueidisCluster},
		{"redigo", redigoSingle, redigoCluster},
	}
}

func goredisSingle(o connOptions) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Network: network(addr), Addr: addr, Username: o.username, Password: o.password, DB: o.db, Dialer: o.goredisDialer()})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

func goredisCluster(o connOptions) conformance.ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: o.username, Password: o.password, Dialer: o.goredisDialer()})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

// redigoDialOptions are the connection settings as redigo dial options.
func redigoDialOptions(o connOptions) []redigoredis.DialOption {
	opts := []redigoredis.DialOption{
		redigoredis.DialReadTimeout(time.Second),
		redigoredis.DialWriteTimeout(time.Second),
		redigoredis.DialUsername(o.username),
		redigoredis.DialPassword(o.password),
		redigoredis.DialDatabase(o.db),
	}
	if o.tls != nil {
		opts = append(opts, redigoredis.DialUseTLS(true), redigoredis.DialTLSConfig(o.tls))
	}
	return opts
}

// redigoPool is the pool the redigo adapter's documentation recommends.
func redigoPool(addr string, opts []redigoredis.DialOption) *redigoredis.Pool {
	nd := &net.Dialer{Timeout: time.Second, KeepAlive: time.Minute}
	return &redigoredis.Pool{
		DialContext: func(ctx context.Context) (redigoredis.Conn, error) {
			return redigo.Dial(ctx, nd, network(addr), addr, opts...)
		},
		TestOnBorrow: redigo.TestOnBorrow,
		MaxActive:    64,
		MaxIdle:      64,
		Wait:         true,
		IdleTimeout:  time.Minute,
	}
}

func redigoSingle(o connOptions) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		p := redigoPool(addr, redigoDialOptions(o))
		return redigo.New(p), func() { _ = p.Close() }, nil
	}
}

func redigoCluster(o connOptions) conformance.ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		c := &redisc.Cluster{
			StartupNodes: addrs,
			DialOptions:  redigoDialOptions(o),
			CreatePool: func(addr string, opts ...redigoredis.DialOption) (*redigoredis.Pool, error) {
				return redigoPool(addr, opts), nil
			},
			PoolWaitTime: time.Second,
		}
		if err := c.Refresh(); err != nil {
			_ = c.Close()
			return nil, nil, err
		}
		return redigo.New(redigo.Cluster(c)), func() { _ = c.Close() }, nil
	}
}

// rueidisOptions are the client options the rueidis adapter's documentation
// recommends, with o's MaxFlushDelay (rueidis's default, none, unless the
// bench sets one).
func rueidisOptions(o connOptions, addrs []string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       addrs,
		Username:          o.username,
		Password:          o.password,
		SelectDB:          o.db,
		TLSConfig:         o.tls,
		DisableCache:      true,
		AlwaysPipelining:  true,
		PipelineMultiplex: -1,
		MaxFlushDelay:     o.rueidisFlushDelay,
		// no background PING, whose timer can race a new connection's
		// start (see the rueidis adapter's documentation)
		Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}},
	}
}

func rueidisSingle(o connOptions) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		opt := rueidisOptions(o, []string{addr})
		opt.ForceSingleClient = true
		if network(addr) == "unix" {
			opt.DialCtxFn = func(ctx context.Context, path string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			}
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, nil, err
		}
		st := rueidisstore.New(c)
		return st, func() { st.Close(); c.Close() }, nil
	}
}

func rueidisCluster(o connOptions) conformance.ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		c, err := rueidis.NewClient(rueidisOptions(o, addrs))
		if err != nil {
			return nil, nil, err
		}
		st := rueidisstore.New(c)
		return st, func() { st.Close(); c.Close() }, nil
	}
}
