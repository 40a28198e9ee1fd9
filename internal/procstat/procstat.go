// Package procstat reads what Linux's /proc says of a process: the bench
// and the tests that bound a server's memory read its resident set size
// the same way.
package procstat

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
)

// RSS is the resident set size of process pid in bytes (VmRSS of
// /proc/PID/status).
func RSS(pid int) (int64, error) {
	name := "/proc/" + strconv.Itoa(pid) + "/status"
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no VmRSS line in " + name)
}
