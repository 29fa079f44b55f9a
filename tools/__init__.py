"""The project's own build tools: not part of the normlib package a learner installs.

translations        the Chinese edition (make translations, make check-translations)
generate_exercises  practice notebooks from the solutions (make generate-exercises, check-exercises)
warmup_grid         recompute lesson 04's cached training runs (make warmup-grid)
workspace           copies the practice notebooks into workspace/ (make exercises)
bench               timings of widgets and notebook cells (make bench)
build_slides        reveal.js decks of the lessons, offline (make slides); its npm packages: slides/
"""
