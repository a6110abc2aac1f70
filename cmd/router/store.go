package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/placementlab/placement/impl/claims"
	"github.com/placementlab/placement/impl/claims/dirstore"
	"github.com/placementlab/placement/impl/claims/etcdstore"
	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

// storeIdleTTL is the claims' idle TTL the command's stores use: every
// replica sharing a store must use the same (the store's is the source of
// truth; impl/replica reads it).
const storeIdleTTL = 30 * time.Minute

// storeSpec is the -store flag: where the claims the router replicas
// share live.
//
//	local                    no store: the local core alone (one router process)
//	embedded                 an embedded etcd (one member) in this process
//	etcd=host:2379,host:2379 an etcd cluster's client endpoints
//	dir=/path                a directory shared by the router processes of one host
type storeSpec struct {
	kind      string // "local", "embedded", "etcd", "dir"
	endpoints []string
	dir       string
}

// parseStore reads the -store flag; empty means local (or, for the demo
// with several replicas, the embedded etcd: its default).
func parseStore(s string) (storeSpec, error) {
	kind, arg, _ := strings.Cut(s, "=")
	switch kind {
	case "", "local":
		return storeSpec{kind: "local"}, nil
	case "embedded":
		return storeSpec{kind: "embedded"}, nil
	case "etcd":
		var eps []string
		for _, e := range strings.Split(arg, ",") {
			if e = strings.TrimSpace(e); e != "" {
				eps = append(eps, e)
			}
		}
		if len(eps) == 0 {
			return storeSpec{}, errors.New("-store etcd=: no endpoints (etcd=host:2379,host:2379)")
		}
		return storeSpec{kind: "etcd", endpoints: eps}, nil
	case "dir":
		if arg == "" {
			return storeSpec{}, errors.New("-store dir=: no directory (dir=/path)")
		}
		return storeSpec{kind: "dir", dir: arg}, nil
	}
	return storeSpec{}, fmt.Errorf("-store %q: want local, embedded, etcd=host:port,... or dir=/path", s)
}

// openedStore is a replica's store handle and what closes it.
type openedStore struct {
	store claims.Store
	close func() error
}

// openStore opens replica's handle on spec's store (nil for local). An
// embedded etcd is started here and stopped by close.
func openStore(ctx context.Context, spec storeSpec, replica string) (*openedStore, error) {
	switch spec.kind {
	case "local":
		return &openedStore{close: func() error { return nil }}, nil
	case "dir":
		s, err := dirstore.Open(dirstore.Config{Dir: spec.dir, IdleTTL: storeIdleTTL}, replica)
		if err != nil {
			return nil, err
		}
		return &openedStore{store: s, close: s.Shutdown}, nil
	case "embedded":
		// A temporary data directory, removed by Close: the embedded
		// store is for one command's run (a demo, a trial).
		c, err := embedded.Start(ctx, embedded.Config{Members: 1})
		if err != nil {
			return nil, err
		}
		cli, err := c.NewClient()
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		st, err := openEtcd(ctx, cli, replica)
		if err != nil {
			_ = cli.Close()
			_ = c.Close()
			return nil, err
		}
		return &openedStore{store: st, close: func() error {
			err := st.Shutdown()
			return errors.Join(err, cli.Close(), c.Close())
		}}, nil
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: spec.endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		st, err := openEtcd(ctx, cli, replica)
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
		return &openedStore{store: st, close: func() error { return errors.Join(st.Shutdown(), cli.Close()) }}, nil
	}
	return nil, fmt.Errorf("store %q", spec.kind)
}

// openEtcd opens replica's etcdstore handle on cli.
func openEtcd(ctx context.Context, cli *clientv3.Client, replica string) (*etcdstore.Store, error) {
	return etcdstore.New(ctx, cli, replica, claims.Options{IdleTTL: storeIdleTTL, Prefix: "placement-router/"},
		etcdstore.WithRequestTimeout(2*time.Second))
}
