"""simtrain.collectives layer (see DESIGN.md)."""
