module github.com/placementlab/placement

go 1.26

require pgregory.net/rapid v1.3.0

require github.com/anishathalye/porcupine v1.3.1
