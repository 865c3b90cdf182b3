package tokens

import (
	"context"
	"strings"
)

// channel carries the cache's events between instances.
const channel = "tokens:events"

// announceRotation tells every other instance to re-read its secret
// (Secret.Rotate).
func (c *Cache) announceRotation(ctx context.Context) error {
	return c.publish(ctx, "rot", "-")
}

// publish sends "<instance> <op> <key>" to every instance.
func (c *Cache) publish(ctx context.Context, op, key string) error {
	return c.store.Publish(ctx, channel, c.id+" "+op+" "+key)
}

func (c *Cache) onMessage(msg string) {
	from, rest, ok := strings.Cut(msg, " ")
	if !ok {
		return
	}
	op, key, ok := strings.Cut(rest, " ")
	if !ok {
		return
	}
	switch op {
	case "set", "inv", "neg":
		if from != c.id {
			c.local.Forget(key)
		}
		c.waiters.notify(key)
	case "rot":
		if from == c.id {
			return
		}
		if changed, _ := c.secret.Reload(); changed {
			c.log.Info("client secret re-read after another instance announced a rotation")
		}
	}
}
