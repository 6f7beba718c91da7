package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// Job is a scheduled task: a prompt for the agent or a !command, run as a
// turn of its own in the chat it was created for (see package schedule).
type Job struct {
	ID      uint64 `json:"id"`
	Gateway string `json:"gateway"`
	ChatID  string `json:"chat_id"`
	UserID  string `json:"user_id,omitempty"`
	// LatchSince is the Since of the latch the job was made (or last
	// resumed) under: a job runs only while that very latch holds, so an
	// unpair pauses it even when the daemon did not see the unpair, and
	// pairing again — the same chat included — does not resume it.
	LatchSince time.Time `json:"latch_since"`
	// Spec is the recurring schedule as the owner wrote it; empty for a
	// one-shot job, which runs once at Next.
	Spec    string    `json:"spec,omitempty"`
	Text    string    `json:"text"`
	Created time.Time `json:"created"`
	// By says who made it: "chat", "agent" or "machine".
	By string `json:"by"`
	// Next is the run due next (zero: none).
	Next time.Time `json:"next"`
	// Runs counts the runs fired; Missed the runs reported missed.
	Runs   uint64 `json:"runs,omitempty"`
	Missed uint64 `json:"missed,omitempty"`
	// Paused says why the job does not run ("" while it runs).
	Paused string `json:"paused,omitempty"`
}

// PutJob stores j; a job with ID 0 gets the next free ID, which is written
// back into j.
func (tx *Tx) PutJob(j *Job) error {
	if j.ID == 0 {
		b, err := tx.bucket(bucketJobs)
		if err != nil {
			return err
		}
		if j.ID, err = b.NextSequence(); err != nil {
			return err
		}
	}
	return tx.putJSON(bucketJobs, u64(j.ID), j)
}

// Job returns the job with id, or nil.
func (tx *Tx) Job(id uint64) (*Job, error) {
	var j Job
	found, err := tx.getJSON(bucketJobs, u64(id), &j)
	if err != nil || !found {
		return nil, err
	}
	return &j, nil
}

// DeleteJob removes a job; removing one that is gone is no error.
func (tx *Tx) DeleteJob(id uint64) error {
	return tx.delete(bucketJobs, u64(id))
}

// Jobs returns every job, in ID order.
func (tx *Tx) Jobs() ([]Job, error) {
	b, err := tx.bucket(bucketJobs)
	if err != nil {
		return nil, err
	}
	var out []Job
	err = b.ForEach(func(k, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("decode job %d: %w", fromU64(k), err)
		}
		out = append(out, j)
		return nil
	})
	return out, err
}
