package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/placementlab/placement/impl/claims/etcdstore/embedded"
)

// A three-member etcd in the process: a member stopped, the cluster still
// serves; restarted, the member has what was written meanwhile.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := embedded.Start(ctx, embedded.Config{Members: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("members:", len(c.Endpoints()))

	if err := c.StopMember(2); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.Client().Put(ctx, "greeting", "hello"); err != nil {
		fmt.Println(err)
		return
	}
	if err := c.RestartMember(ctx, 2); err != nil {
		fmt.Println(err)
		return
	}
	ep, _ := c.Endpoint(2)
	cli, err := c.NewClient(ep)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	for {
		resp, err := cli.Get(ctx, "greeting")
		if err == nil && len(resp.Kvs) == 1 {
			fmt.Println("member 2 read:", string(resp.Kvs[0].Value))
			return
		}
		if ctx.Err() != nil {
			fmt.Println(ctx.Err())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Output:
	// members: 3
	// member 2 read: hello
}
