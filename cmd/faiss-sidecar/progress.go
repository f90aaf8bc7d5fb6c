package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressBar draws "label [=====>    ] 42% 1.2 GiB/2.9 GiB" on one line,
// at most ten times a second. A nil *progressBar does nothing.
type progressBar struct {
	w     io.Writer
	label string
	last  time.Time
}

func newProgressBar(w io.Writer, label string) *progressBar { return &progressBar{w: w, label: label} }

// Update redraws the bar for done of total bytes.
func (p *progressBar) Update(done, total int64) {
	if p == nil || total <= 0 {
		return
	}
	if now := time.Now(); now.Sub(p.last) > 100*time.Millisecond || done >= total {
		p.last = now
		const width = 30
		fill := int(min(done, total) * width / total)
		bar := make([]byte, width)
		for i := range bar {
			switch {
			case i < fill:
				bar[i] = '='
			case i == fill:
				bar[i] = '>'
			default:
				bar[i] = ' '
			}
		}
		fmt.Fprintf(p.w, "\r%s [%s] %3d%% %s/%s", p.label, bar, done*100/total, human(done), human(total))
	}
}

// Done ends the bar's line, if it drew one.
func (p *progressBar) Done() {
	if p != nil && !p.last.IsZero() {
		fmt.Fprintln(p.w)
	}
}
