#pragma once
// hylens tasks: print the items of the study tasks (tasks/registry.hpp), as text or as one
// JSON object per line. The same (task, seed, index) prints the same item on every machine.

#include <hylens/tasks/item_json.hpp>
#include <hylens/tasks/registry.hpp>

#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "args.hpp"

namespace hylens::cli {

/// Prints an item for a person to read.
inline void print_item_text(std::ostream& out, const tasks::Item& item) {
    const auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const std::string& x : v) s += (s.empty() ? "" : " | ") + x;
        return s;
    };
    out << "### " << item.task << " seed=" << item.seed << " index=" << item.index << "\n"
        << "context:  " << item.context << "\n";
    if (!item.alt_context.empty()) out << "alt:      " << item.alt_context << "\n";
    out << "query:    " << item.query << "\n"
        << "expected: " << join(item.expected) << "\n";
    if (!item.alt_expected.empty()) out << "alt_exp:  " << join(item.alt_expected) << "\n";
    out << "fields:   " << item.fields.dump() << "\n\n";
}

inline int run_tasks(int argc, char** argv) {
    CLI::App app("print the items of the channel-study tasks (deterministic for a seed)", "hylens tasks");
    std::vector<std::string> names;
    std::vector<std::uint64_t> seeds{1};
    std::size_t items = 10, start = 0;
    bool json = false, list = false;
    app.add_option("--task", names, "task names, comma-separated (hylens tasks --list)")->delimiter(',');
    app.add_option("--seeds", seeds, "data-generation seeds, comma-separated (default 1)")->delimiter(',');
    app.add_option("--items", items, "items per task and seed (default 10)");
    app.add_option("--start", start, "index of the first item (default 0)");
    app.add_flag("--json", json, "one JSON object per item per line (every Item field)");
    app.add_flag("--list", list, "list the tasks and exit");
    if (const int rc = parse(app, argc, argv); rc >= 0) return rc;
    if (list) {
        for (const tasks::TaskSpec& t : tasks::all_tasks())
            std::cout << t.name << (t.swap ? "  [swap]" : "") << "\n    " << t.description << "\n";
        return 0;
    }
    if (names.empty()) {
        std::cerr << "hylens tasks: --task is required (or --list)\n" << usage_line(app) << "\n";
        return 2;
    }
    if (start > std::numeric_limits<std::size_t>::max() - items) {  // start + items wrapped: no item, exit 0
        std::cerr << "hylens tasks: --start " << start << " + --items " << items << " is past the last item index\n"
                  << usage_line(app) << "\n";
        return 2;
    }
    std::vector<const tasks::TaskSpec*> specs;
    for (const std::string& n : names) {
        try {
            specs.push_back(&tasks::find_task(n));
        } catch (const Error& e) {
            std::cerr << "hylens tasks: " << e.what() << "\n" << usage_line(app) << "\n";
            return 2;
        }
    }
    for (const tasks::TaskSpec* t : specs)
        for (const std::uint64_t seed : seeds)
            for (std::size_t i = start; i < start + items; ++i) {
                const tasks::Item item = t->make(seed, i);
                if (json) std::cout << tasks::item_to_json(item).dump() << "\n";
                else print_item_text(std::cout, item);
            }
    return 0;
}

}  // namespace hylens::cli
