# PT2E 量化實作課: the two commands of the README, and a few more for maintainers.
# Every target sets up what it needs the first time (scripts/bootstrap.sh).

VENV ?= .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
JOBS ?= 2

.PHONY: setup grade release site test test-fast lint lab hub hub-clean bench wheel clean

$(READY): pyproject.toml scripts/bootstrap.sh
	VENV=$(VENV) bash scripts/bootstrap.sh
	@touch $@

setup: $(READY)

## make grade (the main job): grade the sample class in examples/submitted in the sandbox,
## print the gradebook and where the feedback is (graded/<student>/M03/feedback.html)
grade: $(READY)
	$(BIN)/pt2e-course grade M03 --submitted examples/submitted --out graded --jobs $(JOBS)

## make release: run the source notebooks (outputs are committed), regenerate release/ and validate it
release: $(READY)
	$(BIN)/pt2e-course execute
	$(BIN)/pt2e-course release

## make site: the course site from the committed, executed source/ notebooks (nothing re-executed) into _site/;
## make site TERM=1: a graded term's site without solutions (the release notebooks, unanswered, with the sections'
## drawings) into _term_site/ (docs/term.md). Only TERM=1 counts: the shell's own TERM (xterm…) builds _site/.
site: $(READY)
	$(BIN)/python docs/site/build.py --jobs $(JOBS)$(if $(filter 1,$(TERM)), --term)

## make test: lint, then every test (notebooks, checks, nbgrader, grading)
test: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup --durations=20

## make test-fast: between commits: lint, then every test but whole notebooks, nbgrader classes, the
## site, the instruction-set profiles, the sandbox's isolation and warming and release generation, and the
## hidden checks on seed 0 only, M08-3's fixtures left out (tests/conftest.py SLOW_FILES, LOWERING_NOTEBOOKS)
test-fast: $(READY)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(JOBS) -m "not slow" --durations=10

lint: $(READY)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

lab: $(READY)
	$(BIN)/pt2e-course lab

## make hub (as root): a JupyterHub for a demo class on 127.0.0.1:8000, one instructor and two students as local
## users, nbgrader's exchange in hub/, the nine modules in the instructor's course; prints the URL and the accounts;
## Ctrl-C stops it (autograder/maintenance/hub.py)
hub: $(READY)
	$(BIN)/python -m autograder.maintenance.hub

## make hub-clean (as root, the hub stopped): remove the demo's users with their homes, hub/ and the login profile
## script /etc/profile.d/pt2e-course-hub.sh
hub-clean: $(READY)
	$(BIN)/python -m autograder.maintenance.hub --remove

## make wheel: what students install (common, selfcheck: preview, public cases, expected evidence;
## no autograder) as dist/*.whl; build/ is removed first so that no stale module slips in
wheel: $(READY)
	rm -rf build
	$(BIN)/pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation --no-index -w dist .

bench: $(READY)
	$(BIN)/python bench/notebooks.py
	$(BIN)/python bench/grading.py
	$(BIN)/python bench/graded_run.py
	$(BIN)/python bench/record.py
	$(BIN)/python bench/fx_code.py
	$(BIN)/python bench/threads.py
	$(BIN)/python bench/qat.py
	$(BIN)/python bench/install.py
	$(BIN)/python bench/report.py
	$(BIN)/python bench/notebook_diagnosis.py

clean:
	rm -rf autograded feedback graded submitted synthetic grades.csv gradebook.db .pytest_cache build dist _site _term_site
