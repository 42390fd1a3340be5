package config

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// defaultInflightBytes is a quarter of the machine's memory (1 GiB when it
// cannot be read): room for the batches of every worker while loads run,
// far from what would get the process killed.
func defaultInflightBytes() ByteSize {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return ByteSize(kb * 1024 / 4)
			}
		}
	}
	return 1 << 30
}
