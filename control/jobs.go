package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/latchd/latch/logkey"
)

// Scheduled jobs from the machine (`latch jobs`): GET /v1/jobs lists
// them, POST /v1/jobs/add adds one for a gateway's latched chat, POST
// /v1/jobs/rm removes one and stops its run in progress. Like pairing they
// are only on the socket; the daemon refuses add and rm from a process it
// started, so a chat reaches jobs only through its own /every, /at and
// /cancel (and the agent only through its schedule tool, under the
// permission policy).

// ErrBadJob: the job asked for is not valid — a schedule or time that does
// not parse, no text, no such job (400). Its message is for the user.
var ErrBadJob = errors.New("invalid job")

const codeBadJob = "bad_job"

// JobsBackend serves `latch jobs`. A Backend may implement it too; the
// routes answer 404 when it does not.
type JobsBackend interface {
	JobsList(ctx context.Context) ([]JobInfo, error)
	JobsAdd(ctx context.Context, req JobAddRequest) (JobInfo, error)
	JobsRemove(ctx context.Context, id uint64) (JobInfo, error)
}

var _ JobsBackend = (*Client)(nil)

// JobAddRequest asks for a job: Schedule for a recurring one (a cron line,
// @daily, 30m), else At for a one-shot (the forms /at takes).
type JobAddRequest struct {
	Gateway  string `json:"gateway"`
	Schedule string `json:"schedule,omitempty"`
	At       string `json:"at,omitempty"`
	Text     string `json:"text"`
}

// JobInfo is a job as `latch jobs list` shows it.
type JobInfo struct {
	ID       uint64    `json:"id"`
	Gateway  string    `json:"gateway"`
	Schedule string    `json:"schedule,omitempty"` // empty: one-shot
	Next     time.Time `json:"next"`
	Paused   string    `json:"paused,omitempty"`
	Text     string    `json:"text"`
	By       string    `json:"by"`
	Runs     uint64    `json:"runs"`
	Missed   uint64    `json:"missed"`
	// Line is the job in one line, as the chat's /jobs shows it.
	Line string `json:"line"`
}

type jobRemoveRequest struct {
	ID uint64 `json:"id"`
}

func (s *Server) jobsBackend(w http.ResponseWriter) (JobsBackend, bool) {
	jb, ok := s.backend.(JobsBackend)
	if !ok {
		writeError(w, http.StatusNotFound, codeNotFound, "this daemon has no scheduled jobs")
	}
	return jb, ok
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	jb, ok := s.jobsBackend(w)
	if !ok {
		return
	}
	jobs, err := jb.JobsList(r.Context())
	if err != nil {
		s.backendError(w, "jobs list", err)
		return
	}
	writeJSON(w, http.StatusOK, jobs)
}

func (s *Server) handleJobsAdd(w http.ResponseWriter, r *http.Request) {
	jb, ok := s.jobsBackend(w)
	if !ok {
		return
	}
	var req JobAddRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Gateway == "" || (req.Schedule == "") == (req.At == "") {
		writeError(w, http.StatusBadRequest, codeBadRequest, "gateway and one of schedule or at are required")
		return
	}
	job, err := jb.JobsAdd(r.Context(), req)
	s.jobAnswer(w, r, "jobs add", job, err)
}

// jobAnswer answers a change to a job and logs who made it.
func (s *Server) jobAnswer(w http.ResponseWriter, r *http.Request, op string, job JobInfo, err error) {
	if err != nil {
		s.backendError(w, op, err)
		return
	}
	peer, _ := PeerFromContext(r.Context())
	s.log.Info("control: "+op, logkey.Gateway, job.Gateway, "job", job.ID, "peer_pid", peer.PID)
	writeJSON(w, http.StatusOK, job)
}

func (s *Server) handleJobsRemove(w http.ResponseWriter, r *http.Request) {
	jb, ok := s.jobsBackend(w)
	if !ok {
		return
	}
	var req jobRemoveRequest
	if !decodeBody(w, r, &req) {
		return
	}
	job, err := jb.JobsRemove(r.Context(), req.ID)
	s.jobAnswer(w, r, "jobs rm", job, err)
}

// JobsList lists the daemon's scheduled jobs.
func (c *Client) JobsList(ctx context.Context) ([]JobInfo, error) {
	var out []JobInfo
	if err := c.do(ctx, http.MethodGet, "/v1/jobs", nil, &out); err != nil {
		return nil, fmt.Errorf("jobs list: %w", err)
	}
	return out, nil
}

// JobsAdd adds a scheduled job.
func (c *Client) JobsAdd(ctx context.Context, req JobAddRequest) (JobInfo, error) {
	var out JobInfo
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/add", req, &out); err != nil {
		return JobInfo{}, fmt.Errorf("jobs add: %w", err)
	}
	return out, nil
}

// JobsRemove removes a scheduled job.
func (c *Client) JobsRemove(ctx context.Context, id uint64) (JobInfo, error) {
	var out JobInfo
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/rm", jobRemoveRequest{ID: id}, &out); err != nil {
		return JobInfo{}, fmt.Errorf("jobs rm %s: %w", strconv.FormatUint(id, 10), err)
	}
	return out, nil
}
