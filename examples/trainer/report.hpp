// Result tables as GitHub Markdown, padded so that the columns also line up in a terminal,
// and the number formats the trainer prints.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace trainer {

inline std::string fixed(double v, int decimals)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

inline std::string percent(double share) { return fixed(100.0 * share, 2) + " %"; }

class table {
public:
    // First column left-aligned (labels), the others right-aligned (numbers).
    explicit table(std::vector<std::string> header) : header_(std::move(header)) {}

    void add(std::vector<std::string> row)
    {
        row.resize(header_.size());
        rows_.push_back(std::move(row));
    }

    void print(std::FILE* out) const
    {
        std::vector<std::size_t> width(header_.size(), 3);
        for (std::size_t c = 0; c < header_.size(); ++c) {
            width[c] = std::max(width[c], header_[c].size());
            for (const auto& row : rows_)
                width[c] = std::max(width[c], row[c].size());
        }
        const auto line = [&](const std::vector<std::string>& cells) {
            std::string text = "|";
            for (std::size_t c = 0; c < cells.size(); ++c) {
                const std::string pad(width[c] - cells[c].size(), ' ');
                text += ' ';
                text += c == 0 ? cells[c] : pad; // the first column left-aligned, numbers right
                text += c == 0 ? pad : cells[c];
                text += " |";
            }
            std::fprintf(out, "%s\n", text.c_str());
        };
        line(header_);
        std::string rule = "|";
        for (std::size_t c = 0; c < width.size(); ++c)
            rule += c == 0 ? " " + std::string(width[c], '-') + " |" : " " + std::string(width[c] - 1, '-') + ": |";
        std::fprintf(out, "%s\n", rule.c_str());
        for (const auto& row : rows_)
            line(row);
    }

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

} // namespace trainer
