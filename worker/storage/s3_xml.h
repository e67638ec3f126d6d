// Just enough XML for S3's answers (ListObjectsV2, multipart uploads, errors): flat elements, entities decoded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace quark::storage {

/// The inner text of every <tag>...</tag> in `xml`, in order (entities decoded for leaf text). Elements with
/// attributes (<tag a="b">) count too. Not a general parser: S3's documents have no CDATA or same-name nesting.
std::vector<std::string> XmlElements(std::string_view xml, std::string_view tag);

/// The first element's text, or "".
std::string XmlFirst(std::string_view xml, std::string_view tag);

/// Decodes &amp; &lt; &gt; &quot; &apos; and numeric &#NN; / &#xNN; references.
std::string XmlUnescape(std::string_view text);

/// Escapes & < > " ' for element text.
std::string XmlEscape(std::string_view text);

}  // namespace quark::storage
