# @summary A YAML scalar for the config template: numbers and booleans plain
#   (the config parser wants them unquoted), every string double-quoted.
#
# @api private
#
# @param value
#   The value.
function orchestrate::yaml_scalar(Variant[String, Numeric, Boolean] $value) >> String {
  $value ? {
    String  => orchestrate::yaml_string($value),
    Float   => String($value, '%g'),
    default => String($value),
  }
}
