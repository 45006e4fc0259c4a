// SPDX-License-Identifier: Apache-2.0
// Prints items of the study tasks (include/hylens/tasks) as JSON lines, for training the
// organisms on the generators' own text: dump_items TASK SEED_FIRST SEED_COUNT ITEMS_PER_SEED.
// (The same as `hylens tasks --task T --seeds ... --items N --json`, without the CLI.)
#include <hylens/tasks/item_json.hpp>
#include <hylens/tasks/registry.hpp>

#include <cstdint>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    if (argc != 5) {
        std::cerr << "usage: dump_items TASK SEED_FIRST SEED_COUNT ITEMS_PER_SEED\n";
        return 2;
    }
    const auto& task = hylens::tasks::find_task(argv[1]);
    const std::uint64_t first = std::stoull(argv[2]), count = std::stoull(argv[3]);
    const std::size_t n = std::stoul(argv[4]);
    for (std::uint64_t s = first; s < first + count; ++s)
        for (std::size_t i = 0; i < n; ++i) std::cout << hylens::tasks::item_to_json(task.make(s, i)).dump() << "\n";
    return 0;
}
