// Package turn holds what an agent turn shows in a chat: the events the
// agent reports (Events and what they carry), the approval buttons and
// their typed fallback, the tool line, and the few text helpers these
// need. The agent, the Hub and every adapter share it; it imports nothing
// of latch, so an adapter compiles without the agent core.
package turn

import "time"

// Events receives what a turn does, in order, from the turn's goroutine.
type Events interface {
	// Text is a piece of the model's answer as it streams.
	Text(delta string)
	// ToolStarted and ToolFinished bracket one tool call.
	ToolStarted(call ToolCall)
	ToolFinished(call ToolCall, result ToolResult)
	// Approval shows a request; the owner answers through Agent.Decide.
	Approval(a Approval)
	// File hands a workspace file to the chat.
	File(f File) error
	// Final is the answer of the step that ended the turn (its full text;
	// the same text already went through Text).
	Final(text string)
}

// ToolCall is one call the model made.
type ToolCall struct {
	ID, Name, Summary string
}

// ToolResult is how a call ended.
type ToolResult struct {
	Err      error // nil on success
	Denied   bool  // the owner or the policy said no
	Duration time.Duration
}

// Approval is a tool call waiting for the owner.
type Approval struct {
	ID      string
	Tool    string
	Summary string // one line, clipped: for a notice, not for the decision
	// Detail is exactly what the call would do (see agent.ApprovalDetail):
	// every line of a command, invisible characters spelled out. An
	// approval request shows it whole, or says how much it could not show
	// ([ClipMiddle]); a summary clipped to one line could hide a second
	// command after a newline or past its cut.
	Detail string
}

// File is a workspace file the agent hands to the chat.
type File struct {
	Name string
	Data []byte
}
