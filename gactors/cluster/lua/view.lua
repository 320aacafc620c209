-- After membership.lua. ARGV: 1 removed-in-view count.
return view()
