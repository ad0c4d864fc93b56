"""The Jupyter face: magics, the pipeline widget and the DOT -> SVG rendering with states."""
