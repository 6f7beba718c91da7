package matrix

import (
	"context"
	"encoding/json"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/latchd/latch/gateways/adapter"
)

type e2ee struct{}

func openE2EE(ctx context.Context, g *Gateway, v adapter.Vault) (*e2ee, error) { return nil, nil }

func (e *e2ee) afterSync(ctx context.Context, resp *mautrix.RespSync) {}
func (e *e2ee) toDevice(ctx context.Context, evts []*event.Event)     {}
func (e *e2ee) decrypt(ctx context.Context, evt *event.Event) (event.Type, json.RawMessage, error) {
	return event.Type{}, nil, errNoE2EE
}
func (e *e2ee) encrypt(ctx context.Context, rid id.RoomID, typ event.Type, c map[string]any) (any, error) {
	return nil, errNoE2EE
}
