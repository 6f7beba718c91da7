package turn

import "testing"

// TestPayloadRoundTrip: what an adapter puts on a button is what the Hub
// reads back, and the typed fallback names the same kinds.
func TestPayloadRoundTrip(t *testing.T) {
	for _, b := range ApprovalButtons {
		k, id, ok := ParsePayload(Payload(b.Kind, "k3x9p"))
		if !ok || k != b.Kind || id != "k3x9p" {
			t.Errorf("ParsePayload(Payload(%s)) = %s, %q, %t", b.Kind, k, id, ok)
		}
	}
	if _, _, ok := ParsePayload("nocolon"); ok {
		t.Error("a payload without a colon parsed")
	}
	if got, want := ApprovalCommands("k3"), "/approve k3 · /always k3 · /deny k3"; got != want {
		t.Errorf("ApprovalCommands = %q, want %q", got, want)
	}
	if !PayloadsFit(ApprovalButtons, "abc", len("approve:abc")) || PayloadsFit(ApprovalButtons, "abc", len("approve:abc")-1) {
		t.Error("PayloadsFit does not bound the longest payload")
	}
}
