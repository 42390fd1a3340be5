package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// cmdConfig prints the effective config (file, environment, flags) with
// secrets redacted, then the validation result; exit 2 when invalid.
func cmdConfig(args []string) error {
	fs := newFlagSet("config")
	var cf configFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, loadErr := cf.effective()
	if cfg == nil {
		return usageError{loadErr}
	}
	problems := errors.Join(loadErr, cfg.Validate(), cfg.CheckFiles())
	out := cfg.Redacted()
	// Show each model as it runs, defaults filled in.
	out.Merge.Models = cfg.Models()
	return printConfig(os.Stdout, out, problems)
}

func printConfig(w io.Writer, redacted any, problems error) error {
	fmt.Fprintln(w, "# effective config (secrets redacted)")
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(redacted); err != nil {
		return fmt.Errorf("BUG: config does not marshal: %w", err)
	}
	if problems != nil {
		fmt.Fprintf(w, "# validation: FAILED\n")
		return usageError{fmt.Errorf("bad config:\n%s", indent(problems))}
	}
	fmt.Fprintln(w, "# validation: OK")
	return nil
}
