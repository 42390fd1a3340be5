package main

import (
	"flag"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// checkTenantArg says why tenant, given to a command (--tenant,
// /report?tenant=), is not a valid tenant id; given is whether one was
// given at all, whatever its value. One given empty (--tenant "" or
// --tenant=, a script's unset variable) is a malformed tenant, refused
// as an empty X-Scope-OrgID is (tenancy.Named): taken for none given, it
// answered with every tenant's rows where one tenant's were asked for.
func checkTenantArg(tenant string, given bool) error {
	if !given {
		return nil
	}
	return tenancy.CheckTenant(tenant)
}

// flagGiven says whether fs, parsed, was given the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
