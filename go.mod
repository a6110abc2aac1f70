module github.com/placementlab/placement

go 1.26
