module github.com/placementlab/placement

go 1.26.0

require pgregory.net/rapid v1.3.0

require github.com/anishathalye/porcupine v1.3.1

require golang.org/x/image v0.48.0 // indirect
