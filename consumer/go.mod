module example.com/placement-consumer

go 1.26.0

require (
	github.com/placementlab/placement v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.25.0 // indirect
)

replace github.com/placementlab/placement => ../
