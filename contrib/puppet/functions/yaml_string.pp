# @summary A YAML double-quoted scalar holding a value's text exactly, for the
#   config template: every value is quoted, so that no string can turn into a
#   number, a boolean, a null, a comment or a nested structure.
#
# @api private
#
# Backslash, double quote, tab, newline and carriage return are escaped; other
# control characters have no business in a config file and fail the catalog.
#
# @param value
#   The value to quote.
function orchestrate::yaml_string(String $value) >> String {
  $text = $value
  if $text =~ /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/ {
    fail("orchestrate: a control character in the config value '${text}'")
  }
  # regsubst's replacement is Ruby's: '\\\\' in Puppet is two backslashes,
  # which Ruby's gsub turns into one.
  $escaped = $text
    .regsubst(/\\/, '\\\\\\\\', 'G')
    .regsubst(/"/, '\\\\"', 'G')
    .regsubst(/\t/, '\\\\t', 'G')
    .regsubst(/\n/, '\\\\n', 'G')
    .regsubst(/\r/, '\\\\r', 'G')
  "\"${escaped}\""
}
