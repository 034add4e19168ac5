"""Running refreshes: change capture, execution, atomic publish, history."""
