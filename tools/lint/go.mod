// Module lint builds the workflow checker (Temporal's workflowcheck) and staticcheck that
// make test runs, at pinned versions, apart from the project's module so their dependencies
// never move the product's.
module github.com/runnerflow/runnerflow/tools/lint

go 1.26.0

tool (
	go.temporal.io/sdk/contrib/tools/workflowcheck
	honnef.co/go/tools/cmd/staticcheck
)

require (
	github.com/BurntSushi/toml v1.4.1-0.20240526193622-a339e1f7089c // indirect
	go.temporal.io/sdk/contrib/tools/workflowcheck v0.6.0 // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)
