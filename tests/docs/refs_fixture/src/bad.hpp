// References the checker must report, one each:
// docs/nowhere.md
// docs/target.md, "No such heading"
// target.md §9.9
// target.md, § Unquoted
