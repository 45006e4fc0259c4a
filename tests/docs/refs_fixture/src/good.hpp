// References the checker must accept (tests/docs/check_doc_refs.py):
// docs/target.md, "Real heading"; target.md §2.1; target.md, § "real heading";
// docs/target.md, "A bold title"; docs/target.md, "`Real`
// heading"; target.md, "... heading"; docs/target.md with no section.
