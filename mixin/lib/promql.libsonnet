// Small helpers for PromQL text.
{
  // matchers joins label matchers, leaving out empty ones: 'a="1", b="2"'.
  matchers(list):: std.join(', ', std.filter(function(m) m != '', list)),

  // series is metric{matchers}, or metric alone when no matcher is left.
  series(metric, list)::
    local m = self.matchers(list);
    if m == '' then metric else '%s{%s}' % [metric, m],
}
