package turn

import (
	"fmt"
	"strings"
)

// Kind is what a button does. A button's payload, what the platform hands
// back when it is pressed, is "<kind>:<id>" (see Payload); the Hub reads
// it back with ParsePayload.
type Kind string

// The kinds of button. The approval buttons answer an approval request:
// id is the request's.
const (
	KindApprove Kind = "approve"
	KindAlways  Kind = "always"
	KindDeny    Kind = "deny"
	// KindLatchOK and KindLatchNo answer a request to latch a chat
	// (pairing's approval rule); they share no prefix with the tool
	// approvals', so neither can be taken for the other.
	KindLatchOK Kind = "latch-ok"
	KindLatchNo Kind = "latch-no"
)

// Button is one button of a message: its label and its kind.
type Button struct {
	Label string
	Kind  Kind
}

// ApprovalButtons are an approval request's buttons, in the order shown.
var ApprovalButtons = []Button{
	{Label: "Approve", Kind: KindApprove},
	{Label: "Always", Kind: KindAlways},
	{Label: "Deny", Kind: KindDeny},
}

// Payload is the payload of a button of kind k for id.
func Payload(k Kind, id string) string { return string(k) + ":" + id }

// ParsePayload splits a button's payload into its kind and id; ok is
// false for one that is not "<kind>:<id>". The kind is not checked: the
// caller answers one it does not know as expired.
func ParsePayload(data string) (k Kind, id string, ok bool) {
	kind, id, ok := strings.Cut(data, ":")
	return Kind(kind), id, ok
}

// PayloadsFit reports whether the payload of every button of bs for id
// is at most limit bytes, the platform's bound: if not, the request shows
// its typed commands instead (ApprovalCommands).
func PayloadsFit(bs []Button, id string, limit int) bool {
	for _, b := range bs {
		if len(Payload(b.Kind, id)) > limit {
			return false
		}
	}
	return true
}

// ApprovalCommands is the typed answer to an approval request, for a chat
// without buttons: "/approve ID · /always ID · /deny ID".
func ApprovalCommands(id string) string {
	return fmt.Sprintf("/%s %s · /%s %s · /%s %s", KindApprove, id, KindAlways, id, KindDeny, id)
}
