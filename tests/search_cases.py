"""The search suite's table: a small multilingual corpus and what each query must (and must not) find.

Shared by tests/integration/test_search_suite.py (the real tokenizer, indexed row and search SQL on
Postgres) and tests/e2e/test_search_suite.py (a slice of it through the HTTP API). Each case names the
message it must find and one it must not: a near miss that shares script, characters or word parts
with the query (海上 for 上海, ERR_CONN_REFUSED for ERR_CONN_RESET, words out of a phrase's order).
"""

from dataclasses import dataclass

# key → (text, sender name); keys double as the adapter's message ids
CORPUS: dict[str, tuple[str, str | None]] = {
    # English
    "en-launch": ("I'll bring the slides for the Shanghai product launch next Tuesday", None),
    "en-weather": ("The weather in Lisbon was mild all week", "Alice"),
    "en-running": ("I went running along the river this morning", None),
    "en-runner": ("My brother is a marathon runner", None),
    "en-planning": ("We are running the quarterly planning on Thursday", None),
    "en-budget": ("The budget review moved to Friday afternoon", None),
    "en-dentist": ("Reminder: dentist appointment with Dr. Okonkwo at 3pm", None),
    "en-cat": ("Our cat Mochi knocked the plant off the shelf", None),
    "en-group-support": ("The group support was great after the move", None),
    "en-support-group": ("I joined a support group for new parents", None),
    "en-error": ("Deploy failed with ERR_CONN_RESET from the payments gateway", None),
    "en-error-refused": ("Retry hit ERR_CONN_REFUSED on the staging box", None),
    "en-version": ("Upgraded the SDK to v2.3.1 and the crash is gone", None),
    "en-version-next": ("v2.4.0 is planned for next month", None),
    "en-file": ("The bug is in config_loader.py line 42", None),
    "en-yaml": ("Check config.yaml for the loader settings", None),
    "en-snake": ("rename max_retry_count to max_retries everywhere", None),
    "en-host": ("GET https://api.example.com/v1/users returned 502", None),
    "en-email": ("send the invoice to billing@acme.io today", None),
    "en-name": ("Zyxlorp said the offsite is in Reykjavik", None),
    "en-order": ("Order #48213 shipped yesterday", None),
    "en-order-other": ("Order #48231 was cancelled", None),
    # Chinese
    "zh-shanghai": ("下周二我去上海参加产品发布会", None),
    "zh-sea": ("海上的日出很美", None),
    "zh-beijing": ("我在北京工作了三年", None),
    "zh-name": ("我的同事欧阳娜娜明天请假", None),
    "zh-hotpot": ("周末一起去吃火锅吧，我不吃辣", None),
    "zh-meeting": ("会议改到周四下午三点", None),
    "zh-allergy": ("我对花生过敏", None),
    "zh-taipei": ("我們下個月去台北", None),
    "zh-mixed": ("我用Python写了一个ERR_CONN_RESET的处理函数", None),
    "zh-deploy": ("部署在k8s集群上，版本v2.3.1", None),
    # Japanese
    "ja-tokyo": ("来週東京に行きます", None),
    "ja-kyoto": ("京都の紅葉がきれいでした", None),
    "ja-ramen": ("昨日ラーメンを食べた", None),
    "ja-computer": ("コンピューターが壊れました", None),
    "ja-thanks": ("ありがとうございます、たすかりました", None),
    "ja-tanaka": ("田中さんの会議は午後です", None),
    "ja-slack": ("Slackで山田さんにメッセージを送った", None),
    # Korean
    "ko-seoul": ("다음주에 서울에 갑니다", None),
    "ko-busan": ("부산 바다가 그리워요", None),
    "ko-food": ("김치찌개를 먹고 싶어요", None),
    "ko-meeting": ("회의는 내일 오후 세 시에 있어요", None),
    "ko-party": ("민준이가 생일 파티에 초대했어", None),
    "ko-zoom": ("Zoom 링크를 이메일로 보냈어요", None),
}


@dataclass(frozen=True)
class Case:
    id: str
    query: str
    found: str
    not_found: str


CASES = [
    # English: words, stems, exact forms, stopwords, names, phrases
    Case("en-word", "Shanghai", "en-launch", "en-weather"),
    Case("en-two-words", "launch slides", "en-launch", "en-budget"),
    Case("en-stem-runs", "runs", "en-running", "en-cat"),
    Case("en-exact-running", "running", "en-running", "en-budget"),
    Case("en-runner", "marathon runner", "en-runner", "en-dentist"),
    Case("en-quarterly", "quarterly", "en-planning", "en-running"),
    Case("en-unknown-surname", "dentist Okonkwo", "en-dentist", "en-cat"),
    Case("en-pet-name", "Mochi", "en-cat", "en-dentist"),
    Case("en-invented-name", "Zyxlorp", "en-name", "en-weather"),
    Case("en-place", "Reykjavik offsite", "en-name", "en-launch"),
    Case("en-question-stopwords", "When is the dentist appointment?", "en-dentist", "en-cat"),
    Case("en-question-budget", "what is the budget", "en-budget", "en-cat"),
    Case("en-sender-name", "Alice weather", "en-weather", "en-cat"),
    Case("en-phrase", '"support group"', "en-support-group", "en-group-support"),
    Case("en-phrase-reversed", '"group support"', "en-group-support", "en-support-group"),
    Case("en-phrase-product-launch", '"product launch"', "en-launch", "en-support-group"),
    Case("en-phrase-stem", '"went runs"', "en-running", "en-runner"),
    Case("en-gateway", "payments gateway", "en-error", "en-error-refused"),
    # identifiers, numbers, versions, files, hosts
    Case("id-error-code", "ERR_CONN_RESET", "en-error", "en-error-refused"),
    Case("id-error-code-lower", "err_conn_refused", "en-error-refused", "en-error"),
    Case("id-full-width", "ＥＲＲ＿ＣＯＮＮ＿ＲＥＳＥＴ", "en-error", "en-error-refused"),
    Case("id-version", "v2.3.1", "en-version", "en-version-next"),
    Case("id-version-next", "v2.4.0", "en-version-next", "en-version"),
    Case("id-file-name", "config_loader.py", "en-file", "en-yaml"),
    Case("id-yaml", "config.yaml", "en-yaml", "en-file"),
    Case("id-snake-case", "max_retry_count", "en-snake", "en-error"),
    Case("id-host-in-url", "api.example.com", "en-host", "en-email"),
    Case("id-email", "billing@acme.io", "en-email", "en-host"),
    Case("id-number", "48213", "en-order", "en-order-other"),
    Case("id-number-other", "48231", "en-order-other", "en-order"),
    # Chinese: fragments inside runs, names not in any dictionary, traditional script, phrases
    Case("zh-fragment", "上海", "zh-shanghai", "zh-sea"),
    Case("zh-reversed-fragment", "海上", "zh-sea", "zh-shanghai"),
    Case("zh-fragment-end", "发布会", "zh-shanghai", "zh-meeting"),
    Case("zh-city", "北京", "zh-beijing", "zh-shanghai"),
    Case("zh-unknown-name", "欧阳娜娜", "zh-name", "zh-hotpot"),
    Case("zh-food", "火锅", "zh-hotpot", "zh-meeting"),
    Case("zh-not-spicy", "不吃辣", "zh-hotpot", "zh-allergy"),
    Case("zh-one-char", "辣", "zh-hotpot", "zh-allergy"),
    Case("zh-allergy", "花生过敏", "zh-allergy", "zh-hotpot"),
    Case("zh-traditional", "台北", "zh-taipei", "zh-beijing"),
    Case("zh-time", "周四下午", "zh-meeting", "zh-shanghai"),
    Case("zh-phrase", '"上海参加"', "zh-shanghai", "zh-sea"),
    Case("zh-phrase-short", '"去上海"', "zh-shanghai", "zh-beijing"),
    Case("zh-sentence", "我不吃辣的火锅", "zh-hotpot", "ko-food"),
    # Japanese: kanji, katakana, hiragana, names
    Case("ja-kanji", "東京", "ja-tokyo", "ja-kyoto"),
    Case("ja-kanji-other", "京都", "ja-kyoto", "ja-tokyo"),
    Case("ja-katakana", "ラーメン", "ja-ramen", "ja-computer"),
    Case("ja-long-katakana", "コンピューター", "ja-computer", "ja-ramen"),
    Case("ja-hiragana", "たすかりました", "ja-thanks", "ja-tokyo"),
    Case("ja-surname", "田中さん", "ja-tanaka", "ja-kyoto"),
    Case("ja-surname-other", "山田", "ja-slack", "ja-tanaka"),
    Case("ja-phrase", '"東京に行"', "ja-tokyo", "ja-kyoto"),
    # Korean: Hangul fragments, names, particles attached
    Case("ko-city", "서울", "ko-seoul", "ko-busan"),
    Case("ko-two-words", "부산 바다", "ko-busan", "ko-seoul"),
    Case("ko-food", "김치찌개", "ko-food", "ko-meeting"),
    Case("ko-fragment", "회의", "ko-meeting", "ko-food"),
    Case("ko-name", "민준", "ko-party", "ko-seoul"),
    Case("ko-words", "생일 파티", "ko-party", "ko-zoom"),
    Case("ko-phrase", '"서울에 갑니다"', "ko-seoul", "ko-busan"),
    # mixed scripts in the message, the query or both
    Case("mixed-latin-in-chinese", "Python 处理函数", "zh-mixed", "zh-deploy"),
    Case("mixed-code-in-chinese", "ERR_CONN_RESET 处理", "zh-mixed", "en-error-refused"),
    Case("mixed-no-space", "k8s集群", "zh-deploy", "zh-mixed"),
    Case("mixed-version-chinese", "v2.3.1 部署", "zh-deploy", "en-version-next"),
    Case("mixed-latin-in-japanese", "Slack メッセージ", "ja-slack", "ko-zoom"),
    Case("mixed-latin-in-korean", "Zoom 링크", "ko-zoom", "ja-slack"),
    Case("mixed-hangul-loanword", "이메일", "ko-zoom", "ko-meeting"),
    Case("mixed-phrase-across-scripts", '"Python写了"', "zh-mixed", "en-error"),
]

# A slice of every language and kind, asked end to end through HTTP.
E2E_CASES = [
    case
    for case in CASES
    if case.id
    in {
        "en-stem-runs",
        "en-question-stopwords",
        "en-sender-name",
        "en-phrase",
        "id-error-code",
        "id-version",
        "id-file-name",
        "id-host-in-url",
        "zh-fragment",
        "zh-unknown-name",
        "zh-phrase",
        "ja-katakana",
        "ja-surname",
        "ko-city",
        "ko-phrase",
        "mixed-no-space",
        "mixed-phrase-across-scripts",
    }
]
