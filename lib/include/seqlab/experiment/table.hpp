#pragma once
// Tidy tables with named columns, formatted deterministically, and CSV text.
//
// A cell's run_cell fills a CellOutput: one or more named tables (the main one is kMainTable,
// merged into <name>.csv; any other table "t" is merged into <name>_t.csv). An experiment declares
// its tables and their columns (TableSpec, ExperimentSpec::tables); the CellOutput run_cell
// receives starts with every declared table, empty, and a row must have exactly the declared
// columns in the declared order (std::logic_error otherwise). A CellOutput built without
// declarations (tests) accepts any table: the first row added to a table fixes its columns.
// Values are formatted when added (format_int / format_real of options.hpp: integers in decimal,
// reals as %.9g), so the same numbers always give the same bytes.
//
// Example:
//   Row id;
//   id.add("experiment", "long_range_recall").add("T", 10).add("seed", cell.replicate);
//   out.add_row(Row(id).add("test_loss", 0.0123).add("train_time_s", 3.2));
//   out.add_row(Row(id).add("step", 100).add("train_loss", 0.5), "steps");
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "seqlab/experiment/options.hpp"

namespace seqlab::experiment {

/// Name of the main table (merged into <name>.csv).
inline constexpr const char* kMainTable = "main";

/// One row under construction: (column, formatted value) pairs in insertion order.
class Row {
 public:
  /// Integers (and bool, as 0/1) in decimal.
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  Row& add(const std::string& column, I v) {
    if constexpr (std::is_unsigned_v<I>) {
      return add_text(column, std::to_string(static_cast<unsigned long long>(v)));
    } else {
      return add_text(column, format_int(static_cast<std::int64_t>(v)));
    }
  }
  /// Reals as %.9g ("nan", "inf", "-inf" for non-finite values).
  Row& add(const std::string& column, double v) { return add_text(column, format_real(v)); }
  Row& add(const std::string& column, float v) { return add(column, static_cast<double>(v)); }
  Row& add(const std::string& column, const std::string& v) { return add_text(column, v); }
  Row& add(const std::string& column, const char* v) { return add_text(column, v); }
  Row& add(const std::string& column, const Value& v) { return add_text(column, format_value(v)); }
  /// Appends an already formatted value. Throws std::logic_error for a duplicate column name.
  Row& add_text(const std::string& column, std::string text);

  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::string>& values() const { return values_; }

 private:
  std::vector<std::string> columns_;
  std::vector<std::string> values_;
};

/// Columns plus rows of formatted values.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  /// Appends `row`; the first row sets the columns (unless they are already set). Throws std::logic_error naming `name` and
  /// both column lists if the row's columns differ from the table's.
  void append(const Row& row, const std::string& name);
  /// RFC 4180 CSV: header line then one line per row, "\n" line ends, fields quoted only when they
  /// contain a comma, a quote or a line break.
  std::string to_csv() const;
  nlohmann::json to_json() const;
  /// Inverse of to_json; throws std::runtime_error for a malformed object.
  static Table from_json(const nlohmann::json& j);
};

struct Cell;

/// Declaration of one table an experiment writes: its name (kMainTable or letters, digits, '_')
/// and its columns in order.
struct TableSpec {
  using MergeKeep = std::function<bool(const Cell&, const std::vector<std::string>& fields)>;
  TableSpec() = default;
  TableSpec(std::string name_, std::vector<std::string> columns_, MergeKeep merge_keep_ = {})
      : name(std::move(name_)), columns(std::move(columns_)), merge_keep(std::move(merge_keep_)) {}

  std::string name;
  std::vector<std::string> columns;
  /// Optional, for a detail table too large for one CSV (one row per position of every cell):
  /// which of a finished cell's rows the merged <name>_<table>.csv keeps, given the cell, and one
  /// row's fields in `columns` order (as text). The cell files keep every row; meta.json records
  /// both counts ("rows", "rows_in_cells"). Empty (the default): every row is merged. Not for the
  /// main table (run_experiment: a programming error, exit 1).
  MergeKeep merge_keep;
  /// Optional, with merge_keep for the same reason: columns of `columns` that the merged
  /// <name>_<table>.csv leaves out (measurements no figure or verdict reads, or values another
  /// column gives); the cell files keep them, merge_keep still sees every field, and meta.json
  /// lists them ("columns_in_cells_only"). Empty (the default): every column is merged. Each must
  /// be one of `columns`; not for the main table (run_experiment: a programming error, exit 1).
  std::vector<std::string> merge_drop;
  /// A table declared after cells were stored (e.g. a new measurement of some arms): a stored
  /// cell without it is still valid (not corrupt) and contributes no rows to the merge; a cell
  /// that has it is checked as any other. Cells written now always have it (CellOutput). false
  /// (the default): a stored cell without the table is corrupt. Not for the main table
  /// (run_experiment: a programming error, exit 1).
  bool optional = false;
};

/// Quotes a CSV field if needed ("a,b" -> "\"a,b\"", embedded quotes doubled).
std::string csv_escape(const std::string& field);

/// Everything one cell produces: named tables.
class CellOutput {
 public:
  /// No declarations: any table name, columns fixed by each table's first row.
  CellOutput() = default;
  /// Every declared table exists from the start (with its columns and no rows); add_row accepts
  /// only these tables and their exact columns. Throws std::logic_error for an invalid or
  /// duplicate table name or an empty or duplicate column list.
  explicit CellOutput(const std::vector<TableSpec>& declared);
  /// Appends `row` to table `table` (name of letters, digits and '_'). Throws std::logic_error
  /// for an undeclared table (when tables were declared) or columns that differ from the table's.
  void add_row(const Row& row, const std::string& table = kMainTable);
  const std::map<std::string, Table>& tables() const { return tables_; }
  /// Replaces every table by `tables` (a checkpoint's copy of an earlier tables()). Throws
  /// std::logic_error, changing nothing, if the table names differ from this output's (when
  /// tables were declared) or a table's columns differ from its declared ones.
  void restore_tables(std::map<std::string, Table> tables);

 private:
  std::map<std::string, Table> tables_;
  bool declared_ = false;
};

}  // namespace seqlab::experiment
