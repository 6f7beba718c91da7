// Package tools implements the agent's tools: the code that runs when the
// model (or the owner, through a chat command such as !cmd) asks latch to do
// something on the machine. Each tool owns the boundary of its side effects
// (DESIGN.md, invariant 6): RunBash runs a command in a session of its own
// and, when the command ends, times out or is stopped, kills every process
// it started (also those that left its group or session: see killTree),
// and hands the command an environment without the secrets latch holds.
//
// The package is Linux-only for now: RunBash watches the group leader with
// waitid(WNOWAIT), which the other platforms latch might target lack.
package tools
