#!/bin/sh
# check_report.sh PAGE.html OUTDIR — render a report page in headless
# Chromium (Debian's `chromium`) and fail on a broken image, a dead internal
# link, a link or image that needs a file beside the page (index.html must
# stand alone), a script error, two elements sharing an id, a contents
# link that does not land on its section, a figure without a caption or
# without alt text saying what it shows, or a summary whose six answers do
# not fit the first screen (1280 x 800).  Writes OUTDIR/check.txt (the findings,
# the page height with its sections folded and unfolded) and three
# screenshots: OUTDIR/top.png (summary and contents), OUTDIR/compare.png
# (the first section unfolded), OUTDIR/figure.png (a figure).
set -u
page=$1
out=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "check-report: needs Chromium (apt-get install chromium)" >&2
    exit 1
fi
if [ ! -f "$page" ]; then
    echo "check-report: $page: no such page (make demo writes build/demo/report/index.html)" >&2
    exit 1
fi
mkdir -p "$out"
abs=$(cd "$out" && pwd)
# a copy with the checks injected: errors collected from the first script on,
# the verdict written into the page when it has loaded (its images too)
head_js='<script>window.__e=[];window.addEventListener("error",function(e){window.__e.push(e.target&&e.target.tagName?"resource failed: "+(e.target.src||e.target.href||e.target.tagName).slice(0,80):"script error: "+e.message)},true);</script>'
tail_js='<script>window.addEventListener("load",function(){var bad=window.__e.slice();
var im=document.images;for(var i=0;i<im.length;i++){if(!im[i].complete||im[i].naturalWidth===0)bad.push("broken image "+i+": "+im[i].alt);
if(!/^data:/.test(im[i].getAttribute("src")))bad.push("image needs a file beside the page: "+im[i].getAttribute("src"));}
var a=document.querySelectorAll("a[href]");for(var j=0;j<a.length;j++){var h=a[j].getAttribute("href");
if(h.charAt(0)==="#"){if(!document.getElementById(decodeURIComponent(h.slice(1))))bad.push("dead link "+h);}
else if(!/^https?:/.test(h))bad.push("link needs a file beside the page: "+h);}
var ids={},all=document.querySelectorAll("[id]");for(var q=0;q<all.length;q++){var x=all[q].id;if(ids[x])bad.push("duplicate id "+x);ids[x]=1;}
function after(id,tag){var e=document.getElementById(id);while(e&&e.tagName!==tag)e=e.nextElementSibling;return e;}
var cu=after("contents","UL");if(!cu)bad.push("no contents list");else{var ca=cu.querySelectorAll("a[href]");
for(var q2=0;q2<ca.length;q2++){var hh=ca[q2].getAttribute("href"),tg=document.getElementById(decodeURIComponent(hh.slice(1)));
var hd=tg&&tg.tagName==="DETAILS"?tg.querySelector("summary>h2"):tg;
if(!hd||hd.tagName!=="H2"||hd.textContent.trim()!==ca[q2].textContent.trim())bad.push("contents link "+hh+" does not land on its section");}}
var fg=document.querySelectorAll("figure");for(var q3=0;q3<fg.length;q3++){var fi=fg[q3].querySelector("img"),fc=fg[q3].querySelector("figcaption");
if(!fc||!fc.textContent.trim())bad.push("figure without a caption: "+fg[q3].id);
if(!fi||!fi.alt||/[.](png|svg)$/.test(fi.alt))bad.push("figure whose alt text does not say what it shows: "+fg[q3].id);}
var su=after("summary","UL"),six=0;if(!su)bad.push("no summary list");else{var li=su.querySelectorAll("li");
if(li.length<6)bad.push("the summary answers "+li.length+" questions, not six");
else{six=Math.round(li[5].getBoundingClientRect().bottom+window.scrollY);if(six>800)bad.push("the six answers end at "+six+" px, below the first screen (1280 x 800)");}}
var closed=document.documentElement.scrollHeight;var d=document.querySelectorAll("details");
for(var k=0;k<d.length;k++)d[k].open=true;var opened=document.documentElement.scrollHeight;
for(var k2=0;k2<d.length;k2++)d[k2].open=false;
var p=document.createElement("pre");p.id="fp8check";p.textContent="FP8CHECK images="+im.length+" links="+a.length+
" sections="+d.length+" figures="+fg.length+" six_answers_end="+six+" height_folded="+closed+" height_unfolded="+opened+"\\n"+bad.map(function(b){return "FP8BAD "+b}).join("\\n");
document.body.appendChild(p);});</script>'
# (one line each for awk -v, which also turns \\n into \n; index() and
# substr(), not sub(): a replacement's "&" would be the match)
tail_js=$(printf '%s' "$tail_js" | tr -d '\n')
awk -v h="$head_js" -v t="$tail_js" '
    function put(line, tag, text, before,    i) {
        i = index(line, tag)
        if (!i) return line
        return before ? substr(line, 1, i - 1) text substr(line, i) : substr(line, 1, i + length(tag) - 1) text substr(line, i + length(tag))
    }
    { $0 = put($0, "<head>", h, 0); $0 = put($0, "</body>", t, 1); print }' "$page" > "$abs/page.html"
flags="--headless --no-sandbox --disable-gpu --disable-background-networking --disable-dev-shm-usage
       --disable-extensions --disable-sync --no-first-run --hide-scrollbars --mute-audio"
# shellcheck disable=SC2086
timeout 120 "$browser" $flags --virtual-time-budget=30000 --window-size=1280,1000 --dump-dom \
    "file://$abs/page.html" > "$abs/dom.html" 2> "$abs/chromium.log"
# the verdict is the text of <pre id="fp8check"> (the script above also spells FP8CHECK)
sed -n '/<pre id="fp8check">/,/<\/pre>/p' "$abs/dom.html" | sed 's/.*<pre id="fp8check">//; s/<\/pre>.*//' |
    sed 's/&amp;/\&/g; s/&lt;/</g; s/&gt;/>/g' > "$abs/check.txt"
# screenshots of what a reader opens: the page as it loads; the first
# section unfolded (everything else hidden); the first figure alone with
# the headings around it
shot() { # NAME CSS
    awk -v css="<style>$2</style>" '{ i = index($0, "</head>"); if (i) $0 = substr($0, 1, i - 1) css substr($0, i); print }' \
        "$page" | sed 's/<details class="sec"/<details open class="sec"/g' > "$abs/$1.html"
    # shellcheck disable=SC2086
    timeout 120 "$browser" $flags --window-size=1280,1000 --screenshot="$abs/$1.png" "file://$abs/$1.html" \
        >> "$abs/chromium.log" 2>&1
}
timeout 120 "$browser" $flags --window-size=1280,1000 --screenshot="$abs/top.png" "file://$abs/page.html" \
    >> "$abs/chromium.log" 2>&1
shot compare 'body>:not(#recipes-compared){display:none}'
fig=$(grep -o '<figure id="[^"]*' "$abs/page.html" | head -1 | sed 's/.*id="//')
shot figure "body>:not(:has(#$fig)){display:none} details:not(:has(#$fig)),figure:not(#$fig){display:none}
details:has(#$fig)>:not(summary):not(details):not(figure){display:none}"
if ! grep -q '^FP8CHECK' "$abs/check.txt"; then
    echo "check-report: the page did not finish loading in Chromium (see $abs/chromium.log)" >&2
    exit 1
fi
head -1 "$abs/check.txt"
if grep -q '^FP8BAD' "$abs/check.txt"; then
    grep '^FP8BAD' "$abs/check.txt" | sed 's/^FP8BAD /check-report: /' >&2
    exit 1
fi
echo "check-report: no broken image, dead link or page error; screenshots $abs/top.png compare.png figure.png"
