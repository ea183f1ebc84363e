package proc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Job is a child process of the harness that runs to its end (a floor of
// the webhook drain), as opposed to a Proc that serves until stopped.
type Job struct {
	name    string
	cmd     *exec.Cmd
	logPath string
}

// StartJob runs `self args…` with its output in logDir.
func StartJob(ctx context.Context, name, self string, args []string, logDir string) (*Job, error) {
	logPath := logDir + "/" + strings.ReplaceAll(name, " ", "-") + ".log"
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &Job{name: name, cmd: cmd, logPath: logPath}, nil
}

// Wait waits for the job to finish.
func (p *Job) Wait() error {
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w; log: %s", p.name, err, Tail(p.logPath))
	}
	return nil
}
