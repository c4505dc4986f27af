"""simtrain.workload layer (see DESIGN.md)."""
