# Writes IN to OUT with @CONVTUNE_VERSION@ replaced.
configure_file(${IN} ${OUT} @ONLY)
