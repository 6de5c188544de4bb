#include "seqlab/experiment/table.hpp"

#include <cctype>
#include <stdexcept>

namespace seqlab::experiment {

Row& Row::add_text(const std::string& column, std::string text) {
  for (const auto& c : columns_) {
    if (c == column) throw std::logic_error("Row: duplicate column '" + column + "'");
  }
  columns_.push_back(column);
  values_.push_back(std::move(text));
  return *this;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}
}  // namespace

void Table::append(const Row& row, const std::string& name) {
  if (row.columns().empty()) throw std::logic_error("table '" + name + "': a row without columns");
  if (columns.empty()) {
    columns = row.columns();
  } else if (row.columns() != columns) {
    throw std::logic_error("table '" + name + "': row columns (" + join(row.columns()) +
                           ") differ from the table's (" + join(columns) + ")");
  }
  rows.push_back(row.values());
}

std::string csv_escape(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
  std::string out = "\"";
  for (char ch : f) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string Table::to_csv() const {
  std::string out;
  auto line = [&](const std::vector<std::string>& v) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      out += csv_escape(v[i]);
    }
    out += '\n';
  };
  line(columns);
  for (const auto& r : rows) line(r);
  return out;
}

nlohmann::json Table::to_json() const { return {{"columns", columns}, {"rows", rows}}; }

Table Table::from_json(const nlohmann::json& j) {
  Table t;
  try {
    t.columns = j.at("columns").get<std::vector<std::string>>();
    t.rows = j.at("rows").get<std::vector<std::vector<std::string>>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed table: ") + e.what());
  }
  for (const auto& r : t.rows) {
    if (r.size() != t.columns.size()) throw std::runtime_error("malformed table: row width differs");
  }
  return t;
}

namespace {
void check_table_name(const std::string& table, const char* where) {
  bool ok = !table.empty();
  for (char ch : table) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ok)
    throw std::logic_error(std::string(where) + ": table name '" + table +
                           "' must be non-empty letters, digits and '_' (it becomes a file name)");
}
}  // namespace

CellOutput::CellOutput(const std::vector<TableSpec>& declared) : declared_(true) {
  for (const auto& t : declared) {
    check_table_name(t.name, "CellOutput");
    if (tables_.count(t.name)) throw std::logic_error("CellOutput: table '" + t.name + "' declared twice");
    if (t.columns.empty()) throw std::logic_error("CellOutput: table '" + t.name + "' has no columns");
    for (std::size_t i = 0; i < t.columns.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (t.columns[i] == t.columns[j])
          throw std::logic_error("CellOutput: table '" + t.name + "' declares column '" +
                                 t.columns[i] + "' twice");
      }
    }
    tables_[t.name].columns = t.columns;
  }
}

void CellOutput::add_row(const Row& row, const std::string& table) {
  check_table_name(table, "CellOutput::add_row");
  if (declared_ && !tables_.count(table)) {
    std::string names;
    for (const auto& [n, t] : tables_) names += (names.empty() ? "" : ", ") + n;
    throw std::logic_error("CellOutput::add_row: table '" + table +
                           "' is not declared (declared: " + names + ")");
  }
  tables_[table].append(row, table);
}

void CellOutput::restore_tables(std::map<std::string, Table> tables) {
  if (declared_) {
    if (tables.size() != tables_.size())
      throw std::logic_error("CellOutput::restore_tables: " + std::to_string(tables.size()) +
                             " tables given, " + std::to_string(tables_.size()) + " declared");
    for (const auto& [name, t] : tables) {
      const auto it = tables_.find(name);
      if (it == tables_.end())
        throw std::logic_error("CellOutput::restore_tables: table '" + name + "' is not declared");
      if (t.columns != it->second.columns)
        throw std::logic_error("CellOutput::restore_tables: table '" + name +
                               "' has other columns than declared");
    }
  }
  tables_ = std::move(tables);
}

}  // namespace seqlab::experiment
