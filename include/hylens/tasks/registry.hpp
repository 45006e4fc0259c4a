#pragma once
// Every task by name. The language tasks come twice: `language`, `label` and `mixed` score
// the language with CLD2; `language:lexicon`, `label:lexicon` and `mixed:lexicon` generate
// the same items and score with the lexicon of tasks/language_id.hpp (for tiny models).

#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "hylens/core/error.hpp"
#include "hylens/tasks/conjunction.hpp"
#include "hylens/tasks/dictionary.hpp"
#include "hylens/tasks/drm.hpp"
#include "hylens/tasks/label.hpp"
#include "hylens/tasks/language.hpp"
#include "hylens/tasks/list.hpp"
#include "hylens/tasks/mixed.hpp"
#include "hylens/tasks/persona.hpp"
#include "hylens/tasks/task.hpp"

namespace hylens::tasks {

/// All tasks, in a fixed order.
inline const std::vector<TaskSpec>& all_tasks() {
    static const std::vector<TaskSpec> tasks = {
        dictionary_task(),
        list_task(),
        language_task(LanguageId::cld2),
        language_task(LanguageId::lexicon),
        persona_task(),
        mixed_task(LanguageId::cld2),
        mixed_task(LanguageId::lexicon),
        label_task(LanguageId::cld2),
        label_task(LanguageId::lexicon),
        drm_task(),
        conjunction_task(),
    };
    return tasks;
}

/// The names of all tasks, in the order of all_tasks().
inline std::vector<std::string> task_names() {
    std::vector<std::string> names;
    for (const TaskSpec& t : all_tasks()) names.push_back(t.name);
    return names;
}

/// The task called `name`; an Error lists the known names otherwise.
inline const TaskSpec& find_task(std::string_view name) {
    for (const TaskSpec& t : all_tasks())
        if (t.name == name) return t;
    std::string known;
    for (const TaskSpec& t : all_tasks()) known += (known.empty() ? "" : ", ") + t.name;
    fail("[tasks] unknown task '", name, "' (known tasks: ", known, ")");
}

}  // namespace hylens::tasks
